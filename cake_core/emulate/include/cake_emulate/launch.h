// The host side: tensor-map encoding, the launch (every cluster of the grid in turn, its
// blocks' threads as fibers), the report, and the C ABI the Python runner loads.
#pragma once

namespace cake_emu { inline std::string json_str(const std::string& s); }

inline cudaError_t cake_encode_tiled(CUtensorMap* map, CUtensorMapDataType dtype,
                                     cuuint32_t rank, const void* base, const cuuint64_t* dims,
                                     const cuuint64_t* strides, const cuuint32_t* box,
                                     CUtensorMapSwizzle swizzle) {
  const char* why = ::cake_emu::encode_tiled(map, dtype, rank, base, dims, strides, box, swizzle);
  if (why == nullptr) return cudaSuccess;
  const bool ours = why[0] == '@';
  const std::string message = ours ? std::string(why + 1)
                                   : std::string("cuTensorMapEncodeTiled would reject this map: ") + why;
  ::cake_emu::g_report = "{\"ok\": false, \"findings\": [{\"kind\": " +
                         ::cake_emu::json_str(ours ? "global_bounds" : "tensor_map") +
                         ", \"message\": " + ::cake_emu::json_str(message) +
                         ", \"file\": \"\", \"line\": 0, \"threads\": []}], \"stats\": {}}";
  return cudaErrorInvalidValue;
}

inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
// The emulated device's SM count (`sm_count()`): small and fixed, as the simulator's, so a
// persistent kernel's blocks each loop over several tiles; -DCAKE_EMU_SM_COUNT=n changes it.
#ifndef CAKE_EMU_SM_COUNT
#define CAKE_EMU_SM_COUNT 2
#endif
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  if (attr != cudaDevAttrMultiProcessorCount) return cudaErrorNotSupported;
  *value = CAKE_EMU_SM_COUNT;
  return cudaSuccess;
}
template <typename K>
inline cudaError_t cudaFuncSetAttribute(K, cudaFuncAttribute, int bytes) {
  return bytes >= 0 && static_cast<uint32_t>(bytes) <= ::cake_emu::SMEM_MAX ? cudaSuccess
                                                                           : cudaErrorInvalidValue;
}

namespace cake_emu {

inline std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) o += fmt("\\u%04x", c);
        else o += c;
    }
  }
  return o + "\"";
}

inline std::string report_json(const Launch& L, double seconds) {
  std::string o = "{\"ok\": ";
  o += L.findings.empty() ? "true" : "false";
  o += ", \"findings\": [";
  for (size_t i = 0; i < L.findings.size(); ++i) {
    const Finding& f = L.findings[i];
    if (i) o += ", ";
    o += "{\"kind\": " + json_str(f.kind) + ", \"message\": " + json_str(f.message) +
         ", \"file\": " + json_str(f.loc.file ? f.loc.file : "") +
         ", \"line\": " + std::to_string(f.loc.line) + ", \"threads\": [";
    for (size_t j = 0; j < f.threads.size(); ++j) {
      const ThreadNote& t = f.threads[j];
      if (j) o += ", ";
      o += fmt("{\"block\": [%u, %u, %u], \"thread\": %d, \"count\": %d, ", t.block.x, t.block.y,
               t.block.z, t.thread, t.count);
      o += "\"file\": " + json_str(t.loc.file ? t.loc.file : "") +
           ", \"line\": " + std::to_string(t.loc.line) + ", \"state\": " + json_str(t.state) + "}";
    }
    o += "]}";
  }
  o += fmt("], \"stats\": {\"blocks\": %llu, \"threads\": %llu, \"switches\": %llu, "
           "\"async_ops\": %llu, \"seconds\": %.3f}}",
           static_cast<unsigned long long>(L.blocks_run),
           static_cast<unsigned long long>(L.threads_run),
           static_cast<unsigned long long>(L.switches),
           static_cast<unsigned long long>(L.async_ops), seconds);
  return o;
}

inline void fiber_start() { thread_main(); }

inline cudaError_t refuse(const std::string& why) {
  g_report = "{\"ok\": false, \"findings\": [{\"kind\": \"launch\", \"message\": " +
             json_str(why) + ", \"file\": \"\", \"line\": 0, \"threads\": []}], \"stats\": {}}";
  return cudaErrorInvalidValue;
}

// Run clusters one after another; the threads of one cluster's blocks interleave.
inline cudaError_t run_grid(dim3 grid, dim3 block, dim3 cluster, size_t smem, int launch_regs,
                            std::function<void()> call) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t nthreads = uint64_t(block.x) * block.y * block.z;
  if (nthreads == 0 || nthreads > 1024) return refuse(fmt("%llu threads per block (1..1024)",
                                                          static_cast<unsigned long long>(nthreads)));
  if (smem > SMEM_MAX) return refuse(fmt("%zu B of dynamic shared memory (at most %u)", smem,
                                         SMEM_MAX));
  if (grid.x % cluster.x || grid.y % cluster.y || grid.z % cluster.z) {
    return refuse("the grid is not a whole number of clusters");
  }
  Launch L;
  L.rng = g_seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
  L.flags = g_flags;
  L.grid = grid; L.block_dim = block; L.cluster = cluster; L.launch_regs = launch_regs;
  g_launch = &L;
  g_kernel_call = std::move(call);
  const uint32_t smem_alloc = static_cast<uint32_t>((smem + 1023) / 1024 * 1024);
  const int per_cluster = static_cast<int>(cluster.x * cluster.y * cluster.z);
  std::vector<unsigned char*> storage;
  for (int i = 0; i < per_cluster; ++i) {
    storage.push_back(static_cast<unsigned char*>(std::aligned_alloc(1024, smem_alloc ? smem_alloc : 1024)));
  }
  for (unsigned cz = 0; cz < grid.z / cluster.z && !L.aborted; ++cz)
  for (unsigned cy = 0; cy < grid.y / cluster.y && !L.aborted; ++cy)
  for (unsigned cx = 0; cx < grid.x / cluster.x && !L.aborted; ++cx) {
    L.blocks.clear();
    L.cluster_bar = NamedBar{};
    L.threads.clear();
    L.ops.clear();
    L.pending.clear();
    size_t stack_i = 0;
    int rank = 0;
    for (unsigned z = 0; z < cluster.z; ++z)
    for (unsigned y = 0; y < cluster.y; ++y)
    for (unsigned x = 0; x < cluster.x; ++x, ++rank) {
      auto b = std::make_unique<Block>();
      b->idx = {cx * cluster.x + x, cy * cluster.y + y, cz * cluster.z + z};
      b->cluster_idx = {x, y, z};
      b->cluster_rank = rank;
      b->smem = storage[rank];
      b->smem_bytes = static_cast<uint32_t>(smem);
      std::memset(b->smem, 0xFF, smem_alloc ? smem_alloc : 1024);  // NaN-like garbage
      b->init.assign(smem, 0);
      b->dirty_by.assign(smem, 0);
      const int warps = static_cast<int>((nthreads + 31) / 32);
      for (int w = 0; w < warps; ++w) b->warp_coll.push_back(std::make_unique<Collective>());
      for (int w = 0; w < (warps + 3) / 4; ++w) b->wg_coll.push_back(std::make_unique<Collective>());
      b->wgs.resize(static_cast<size_t>((warps + 3) / 4));
      for (uint64_t i = 0; i < nthreads; ++i) {
        auto t = std::make_unique<Thread>();
        t->block = b.get();
        t->tid = static_cast<int>(i);
        t->idx = {static_cast<unsigned>(i % block.x),
                  static_cast<unsigned>((i / block.x) % block.y),
                  static_cast<unsigned>(i / (uint64_t(block.x) * block.y))};
        t->stack = get_stack(stack_i++);
        if (t->stack == nullptr) { g_launch = nullptr; return refuse("out of memory for thread stacks"); }
        getcontext(&t->ctx);
        t->ctx.uc_stack.ss_sp = t->stack;
        t->ctx.uc_stack.ss_size = STACK_BYTES;
        t->ctx.uc_link = nullptr;
        makecontext(&t->ctx, fiber_start, 0);
        b->threads.push_back(t.get());
        L.threads.push_back(std::move(t));
      }
      b->live = static_cast<int>(nthreads);
      L.blocks.push_back(std::move(b));
    }
    L.blocks_run += static_cast<uint64_t>(per_cluster);
    L.threads_run += nthreads * static_cast<uint64_t>(per_cluster);
    try {
      schedule();
    } catch (Abort&) {
      L.aborted = true;
    }
  }
  for (unsigned char* p : storage) std::free(p);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g_report = report_json(L, secs);
  const bool ok = L.findings.empty();
  g_launch = nullptr;
  g_current = nullptr;
  L.blocks.clear();
  L.threads.clear();
  return ok ? cudaSuccess : cudaErrorLaunchFailure;
}

}  // namespace cake_emu

// The launcher's `kernel<<<grid, block, smem, stream>>>(args...)` under emulation.
template <typename... P, typename... A>
inline cudaError_t cake_emu_launch(void (*kernel)(P...), dim3 grid, dim3 block, dim3 cluster,
                                   size_t smem, int launch_regs, cudaStream_t, A... args) {
  return ::cake_emu::run_grid(grid, block, cluster, smem, launch_regs,
                              [=] { kernel(args...); });
}

extern "C" {
void cake_emu_configure(unsigned long long seed, int flags) {
  ::cake_emu::g_seed = seed;
  ::cake_emu::g_flags = flags;
}
void cake_emu_register_buffer(const void* p, unsigned long long bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  ::cake_emu::g_buffers.push_back({lo, lo + bytes});
}
void cake_emu_clear_buffers(void) { ::cake_emu::g_buffers.clear(); }
const char* cake_emu_report(void) { return ::cake_emu::g_report.c_str(); }
const char* cake_runtime_error_string(int code) {
  switch (code) {
    case 0: return "no error";
    case 1: return "invalid argument";
    case 719: return "unspecified launch failure (emulated: see the report)";
    default: return "error";
  }
}
int cake_runtime_setup(void) { return 0; }
}
