// The execution model: every CUDA thread of a launch is a fiber (ucontext), a seeded
// scheduler picks which runnable thread continues whenever one blocks (barriers, waits,
// warp collectives) or reaches a preemption point, and asynchronous operations (TMA,
// cp.async, wgmma, bulk stores) complete at scheduler-chosen times: as late as their
// waits allow by default, or at issue under CAKE_EMU_EAGER.  Blocks of one cluster run
// together; clusters run one after another.  A run is a function of (kernel, inputs,
// seed), so a failure replays exactly.
//
// Problems become findings with the .cake line of the statement at fault: every helper
// takes the caller's location through __builtin_FILE()/__builtin_LINE() default
// arguments, which follow the #line directives of the lowered file.
#pragma once

#include <ucontext.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#define CAKE_LOC const char *cake_file = __builtin_FILE(), int cake_line = __builtin_LINE()
#define CAKE_LOC_ARGS cake_file, cake_line

namespace cake_emu {

enum : int { EAGER = 1 };

struct Loc { const char* file; int line; };

struct ThreadNote {
  uint3 block;
  int thread;
  int count;
  Loc loc;
  std::string state;
};

struct Finding {
  std::string kind, message;
  Loc loc;
  std::vector<ThreadNote> threads;
};

struct Block;
struct Thread;

// What a blocked thread waits for: re-evaluated by the scheduler.
struct Wait {
  std::function<bool()> ready;
  std::function<std::string()> describe;
  Loc loc;
};

struct Thread {
  ucontext_t ctx;
  Block* block = nullptr;
  int tid = 0;            // linear index in the block
  uint3 idx{0, 0, 0};
  bool started = false, exited = false, blocked = false;
  Wait wait;
  Loc last{"", 0};
  Loc site{"", 0};  // the .cake statement a prelude helper runs for (sites.h)
  // asynchronous-operation bookkeeping owned by this thread
  std::vector<std::vector<size_t>> cp_groups;  // committed cp.async groups (op ids)
  std::vector<size_t> cp_open;                 // issued, not yet committed
  std::vector<std::vector<size_t>> bulk_groups;
  std::vector<size_t> bulk_open;
  std::vector<std::vector<size_t>> wgmma_groups;  // committed wgmma ops (warpgroup op ids)
  std::vector<size_t> wgmma_open;
  uint64_t wgmma_issued = 0;    // how many wgmma this thread issued (its op sequence)
  uint64_t warp_coll = 0;       // collective sequence numbers
  uint64_t wg_coll = 0;
  std::vector<std::pair<uint32_t, uint32_t>> dirty;  // generic smem writes since its last proxy fence
  char* stack = nullptr;
};

struct Launch;
inline Launch* g_launch = nullptr;
inline Thread* g_current = nullptr;

// A fatal problem: unwinds the current fiber to the scheduler.
[[noreturn]] void fail(const std::string& kind, const std::string& message, Loc loc);
void note(const std::string& kind, const std::string& message, Loc loc);
void block_until(std::function<bool()> ready, std::function<std::string()> describe, Loc loc);
void preempt(Loc loc);

// ---- asynchronous operations --------------------------------------------------------------
struct AsyncOp {
  std::function<void()> run;
  std::string what;
  Loc loc;
  bool done = false;
  Block* block = nullptr;
};

// ---- mbarriers, named barriers, collectives -------------------------------------------------
struct MBar {
  uint32_t expected = 0, pending = 0;
  int64_t tx = 0;
  uint64_t phase = 0;
  Loc init{"", 0};
};

struct NamedBar { int arrived = 0; int count = 0; uint64_t gen = 0; Loc first{"", 0}; };

struct Collective {
  uint64_t gen = 0;
  int arrived = 0;
  Loc first{"", 0};
  const char* what = "";
  unsigned char in[128][32];
  unsigned char out[2][128][32];
};

struct WgmmaOp {
  uint64_t seq;
  int n = 0, kind = 0;            // kind: 0 bf16, 1 f16, 2 e4m3, 3 e5m2
  uint64_t desc_a = 0, desc_b = 0;
  bool a_regs = false;            // A from registers: each thread's four .b32 in `ra`
  bool scale_d = true;            // false: this instruction overwrites d (scale-d 0)
  uint32_t ra[128][4] = {};
  int issued = 0;
  float* acc[128] = {};
  bool done = false;
  Loc loc{"", 0};
};

struct Warpgroup {
  std::map<uint64_t, WgmmaOp> ops;  // by issue sequence
  int regs = 0;                     // setmaxnreg's current per-thread count (0: unknown)
  uint64_t setmax_done = 0;
};

struct Block {
  uint3 idx{0, 0, 0};
  uint3 cluster_idx{0, 0, 0};
  int cluster_rank = 0;
  std::vector<Thread*> threads;
  unsigned char* smem = nullptr;       // host storage, 1024-aligned
  uint32_t smem_bytes = 0;
  std::vector<unsigned char> init;     // per byte: written since launch?
  std::vector<int32_t> dirty_by;       // per byte: generic writer (tid+1) not yet proxy-fenced
  std::unordered_map<uint32_t, MBar> mbars;
  NamedBar bars[16];
  std::vector<std::unique_ptr<Collective>> warp_coll;  // one per warp
  std::vector<std::unique_ptr<Collective>> wg_coll;    // one per warpgroup
  std::vector<Warpgroup> wgs;
  int live = 0;
};

struct Buffer { uintptr_t lo, hi; };

inline constexpr uint32_t SMEM_BASE = 1024;      // shared-window address of a block's smem
inline constexpr uint32_t SMEM_MAX = 232448;     // sm_90 / sm_100 opt-in maximum per block
inline constexpr size_t STACK_BYTES = 512 * 1024;

struct Launch {
  uint64_t rng;
  int flags = 0;
  dim3 grid, block_dim, cluster;
  int launch_regs = 0;
  std::vector<std::unique_ptr<Block>> blocks;  // the running cluster
  NamedBar cluster_bar;                        // barrier.cluster over the running cluster
  std::vector<std::unique_ptr<Thread>> threads;
  std::vector<AsyncOp> ops;
  std::vector<size_t> pending;                 // op ids not yet done
  ucontext_t sched;
  std::vector<Finding> findings;
  bool aborted = false;
  uint64_t switches = 0, async_ops = 0, blocks_run = 0, threads_run = 0;

  uint64_t next() {  // xorshift64*
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
  }
};

inline uint64_t g_seed = 0x9E3779B97F4A7C15ULL;
inline int g_flags = 0;
inline std::vector<Buffer> g_buffers;
inline std::string g_report = "{\"ok\": true, \"findings\": [], \"stats\": {}}";
inline std::vector<char*> g_stacks;

inline Thread& cur() { return *g_current; }
inline Block& blk() { return *g_current->block; }

// A location in the .cake source: helpers called from the prelude's own C++ (whose
// __builtin_LINE is a line of the generated file) report the statement they serve.
inline Loc at(Loc l) {
  const size_t n = std::strlen(l.file);
  if (n >= 5 && std::strcmp(l.file + n - 5, ".cake") == 0) return l;
  return g_current && g_current->site.line ? g_current->site : l;
}
inline void site(const char* file, int line) { g_current->site = {file, line}; }

// ---- findings -------------------------------------------------------------------------------
struct Abort {};

inline void note(const std::string& kind, const std::string& message, Loc loc) {
  if (g_launch->findings.size() < 64) g_launch->findings.push_back({kind, message, loc, {}});
}

[[noreturn]] inline void fail(const std::string& kind, const std::string& message, Loc loc) {
  Finding f{kind, message, loc, {}};
  if (g_current) {
    f.threads.push_back({g_current->block->idx, g_current->tid, 1, loc, "here"});
  }
  g_launch->findings.push_back(std::move(f));
  g_launch->aborted = true;
  if (g_current) {
    Thread* t = g_current;
    t->blocked = true;
    t->wait = {[] { return false; }, [] { return std::string("stopped"); }, loc};
    swapcontext(&t->ctx, &g_launch->sched);
  }
  throw Abort{};  // outside a fiber: the launcher catches it
}

inline std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
inline std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

inline std::string where(Loc l) { return fmt("%s:%d", l.file, l.line); }

// ---- the scheduler --------------------------------------------------------------------------
inline void switch_out() {
  Thread* t = g_current;
  ++g_launch->switches;
  swapcontext(&t->ctx, &g_launch->sched);
}

inline void block_until(std::function<bool()> ready, std::function<std::string()> describe,
                        Loc loc) {
  Thread& t = cur();
  t.last = loc;
  // The condition is re-tested when the thread runs again: another thread may have run
  // between the scheduler's test and this one's turn (a polling wait can miss a phase, as
  // on the GPU, and a resource taken in between is not there any more).
  while (!ready()) {
    t.blocked = true;
    t.wait = {ready, describe, loc};
    switch_out();
  }
}

// A point where another thread may run first: how races become visible.
inline void preempt(Loc loc) {
  cur().last = loc;
  if ((g_launch->next() & 7u) == 0) switch_out();
}

inline size_t add_async(std::function<void()> run, std::string what, Loc loc) {
  Launch& L = *g_launch;
  L.ops.push_back({std::move(run), std::move(what), loc, false, g_current ? g_current->block
                                                                          : nullptr});
  const size_t id = L.ops.size() - 1;
  ++L.async_ops;
  if (L.flags & EAGER) {
    L.ops[id].done = true;
    L.ops[id].run();
  } else {
    L.pending.push_back(id);
  }
  return id;
}

// Complete `id` now if it has not completed (a wait that needs it).
inline void complete(size_t id) {
  Launch& L = *g_launch;
  if (L.ops[id].done) return;
  L.ops[id].done = true;
  for (size_t i = 0; i < L.pending.size(); ++i) {
    if (L.pending[i] == id) { L.pending[i] = L.pending.back(); L.pending.pop_back(); break; }
  }
  auto run = std::move(L.ops[id].run);
  run();
}

inline void thread_entry();

inline std::function<void()> g_kernel_call;

inline void thread_main() {
  try {
    g_kernel_call();
  } catch (Abort&) {
  }
  Thread& t = cur();
  t.exited = true;
  t.block->live -= 1;
  swapcontext(&t.ctx, &g_launch->sched);
}

inline char* get_stack(size_t i) {
  while (g_stacks.size() <= i) {
    void* p = mmap(nullptr, STACK_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    mprotect(p, 4096, PROT_NONE);  // a guard page: an overflowing fiber faults
    g_stacks.push_back(static_cast<char*>(p));
  }
  return g_stacks[i];
}

inline std::string describe_thread(const Thread& t) {
  return t.wait.describe ? t.wait.describe() : std::string("blocked");
}

inline void report_deadlock() {
  Launch& L = *g_launch;
  Finding f{"deadlock", "", {"", 0}, {}};
  // group waiting threads by (block, location, state)
  std::map<std::tuple<int, std::string, int, std::string>, ThreadNote> groups;
  int waiting = 0;
  for (auto& tp : L.threads) {
    Thread& t = *tp;
    if (t.exited) continue;
    ++waiting;
    const std::string st = describe_thread(t);
    const int b = t.block->cluster_rank;
    auto key = std::make_tuple(b, std::string(t.wait.loc.file), t.wait.loc.line, st);
    auto it = groups.find(key);
    if (it == groups.end()) groups.emplace(key, ThreadNote{t.block->idx, t.tid, 1, t.wait.loc, st});
    else it->second.count += 1;
  }
  for (auto& kv : groups) f.threads.push_back(kv.second);
  if (!f.threads.empty()) f.loc = f.threads.front().loc;
  f.message = fmt("no thread can make progress: %d thread(s) wait and no asynchronous operation "
                  "is in flight", waiting);
  L.findings.push_back(std::move(f));
  L.aborted = true;
}

// Run every thread of the current cluster to completion (or to a finding).
inline void schedule() {
  Launch& L = *g_launch;
  std::vector<Thread*> runnable;
  for (;;) {
    if (L.aborted) return;
    runnable.clear();
    bool all_exited = true;
    for (auto& tp : L.threads) {
      Thread& t = *tp;
      if (t.exited) continue;
      all_exited = false;
      if (!t.blocked) { runnable.push_back(&t); continue; }
      g_current = &t;  // predicates may look at their thread
      if (t.wait.ready()) { t.blocked = false; runnable.push_back(&t); }
    }
    g_current = nullptr;
    if (all_exited) {
      // bulk stores still reading smem finish before the block's smem goes away
      while (!L.pending.empty()) complete(L.pending[L.next() % L.pending.size()]);
      return;
    }
    const bool pick_op = !L.pending.empty() && (runnable.empty() || (L.next() & 3u) == 0);
    if (pick_op) {
      complete(L.pending[L.next() % L.pending.size()]);
      continue;
    }
    if (runnable.empty()) { report_deadlock(); return; }
    Thread* t = runnable[L.next() % runnable.size()];
    g_current = t;
    ++L.switches;
    swapcontext(&L.sched, &t->ctx);
    g_current = nullptr;
  }
}

}  // namespace cake_emu

// ---- thread and block indices -------------------------------------------------------------
namespace cake_emu {
inline uint3 thread_idx() { return g_current->idx; }
inline uint3 block_idx() { return g_current->block->idx; }
inline uint3 block_dim() { return {g_launch->block_dim.x, g_launch->block_dim.y, g_launch->block_dim.z}; }
inline uint3 grid_dim() { return {g_launch->grid.x, g_launch->grid.y, g_launch->grid.z}; }
}  // namespace cake_emu
#define threadIdx (::cake_emu::thread_idx())
#define blockIdx (::cake_emu::block_idx())
#define blockDim (::cake_emu::block_dim())
#define gridDim (::cake_emu::grid_dim())
