/* A C++ program whose procedures have mangled symbols: ROUNDS rounds, each a member
 * function (stages::Solver::relax(int), RELAX_MS of CPU) then a function template
 * (stages::norm<double>, NORM_MS). One thread, so the critical path is all its work.
 * Usage: cpp_stages ROUNDS RELAX_MS NORM_MS */
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "spin.h"

namespace stages {

class Solver {
public:
    explicit Solver(double ms) : ms_(ms) {}
    __attribute__((noinline)) void relax(int sweep);

private:
    double ms_;
};

void Solver::relax(int sweep) {
    (void)sweep;
    spin_ms(ms_);
}

template <typename T>
__attribute__((noinline)) T norm(const std::vector<T> &v, double ms) {
    spin_ms(ms);
    T sum = 0;
    for (const T &x : v) sum += x * x;
    return sum;
}

}  // namespace stages

int main(int argc, char **argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s ROUNDS RELAX_MS NORM_MS\n", argv[0]);
        return 2;
    }
    int rounds = std::atoi(argv[1]);
    stages::Solver solver(std::atof(argv[2]));
    double norm_ms = std::atof(argv[3]);
    std::vector<double> v(16, 0.5);
    double total = 0;
    for (int i = 0; i < rounds; i++) {
        solver.relax(i);
        total += stages::norm(v, norm_ms);
    }
    std::printf("%g\n", total);
    return 0;
}
