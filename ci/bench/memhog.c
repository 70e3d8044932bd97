/* A foreign load like a compiler's for ci/bench/agent-vs-perf (KPROF_BENCH_MEMHOG): deep,
 * irregular call stacks with varied locals (so --call-graph dwarf stack copies compress
 * poorly, as cc1's and rustc's do) whose leaves stream through a 64 MiB buffer (so the machine's
 * memory bandwidth is taken, as a build's is). Runs until killed. */
#include <stdint.h>
#include <stdlib.h>

#define BUF (64u << 20)

static uint8_t *buf;
static uint64_t seed = 0x9e3779b97f4a7c15u;

static uint64_t next(void) {
  seed ^= seed << 13;
  seed ^= seed >> 7;
  seed ^= seed << 17;
  return seed;
}

static __attribute__((noinline)) uint64_t leaf(uint64_t x) {
  uint64_t sum = x;
  size_t at = (size_t)(next() % BUF) & ~(size_t)63;
  /* 256 KiB of cache lines from a random place, written back. */
  for (size_t i = 0; i < (256u << 10); i += 64) {
    size_t j = (at + i) % BUF;
    sum += buf[j];
    buf[j] = (uint8_t)sum;
  }
  return sum;
}

static __attribute__((noinline)) uint64_t descend(unsigned depth, uint64_t x) {
  volatile uint64_t locals[8];
  for (unsigned i = 0; i < 8; i++)
    locals[i] = next() ^ x;
  uint64_t r = depth == 0 ? leaf(locals[x & 7]) : descend(depth - 1, locals[depth & 7]);
  return r + locals[0];
}

int main(void) {
  buf = malloc(BUF);
  if (!buf)
    return 1;
  for (size_t i = 0; i < BUF; i += 4096)
    buf[i] = (uint8_t)i;
  uint64_t acc = 0;
  for (;;)
    acc += descend(8 + (unsigned)(next() % 56), acc);
}
