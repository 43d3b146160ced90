// Included after the prelude under CAKE_EMULATE: calls of the prelude's plain-C++ helpers
// from kernel code record their .cake line first, so a wait inside cake_pipe_acquire is
// reported at the statement that acquired, not at a line of the generated prelude.  (A
// function-like macro does not expand inside its own expansion, so the call still reaches
// the helper the prelude defined.)
#pragma once
#define cake_pipe_acquire(...) (::cake_emu::site(__FILE__, __LINE__), cake_pipe_acquire(__VA_ARGS__))
#define cake_pipe_wait(...) (::cake_emu::site(__FILE__, __LINE__), cake_pipe_wait(__VA_ARGS__))
#define cake_argmin_xor(...) (::cake_emu::site(__FILE__, __LINE__), cake_argmin_xor(__VA_ARGS__))
#define cake_argmax_xor(...) (::cake_emu::site(__FILE__, __LINE__), cake_argmax_xor(__VA_ARGS__))
#define cake_shfl_xor(...) (::cake_emu::site(__FILE__, __LINE__), cake_shfl_xor(__VA_ARGS__))
