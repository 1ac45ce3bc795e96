// Sampled stacks of a C++ program built -O2 (docs/sampling.md): main ->
// chain::Outer::run -> chain::inner<unsigned long>, inner spinning for 0.5 s.
#include <chrono>
#include <cstdio>

namespace chain {

volatile unsigned long sink;

template <typename T>
__attribute__((noinline)) T inner(double secs) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(secs);
    T x = sink | 1;
    do {
        for (int i = 0; i < (1 << 20); i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
        sink = x;
    } while (std::chrono::steady_clock::now() < end);
    return x;
}

struct Outer {
    __attribute__((noinline)) unsigned long run(double secs) { return inner<unsigned long>(secs) + 1; }
};

}  // namespace chain

int main() {
    chain::Outer o;
    std::printf("%lu\n", o.run(0.5));
    return 0;
}
