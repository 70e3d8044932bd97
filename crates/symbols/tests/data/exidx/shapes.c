/* One function per EHABI opcode class GCC emits: built -marm and -mthumb, with and without
   -fno-omit-frame-pointer (-DFP), and compared with readelf -u by tests/exidx.rs. */
#include <alloca.h>
#include <string.h>

extern void sink(void *p, int n);
extern double dsink(double);

/* Leaf: nothing saved, "finish" only. */
__attribute__((noinline)) int leaf(int a, int b) { return a * b + 3; }

/* r4-r11 and lr pushed (0xaf / 0xab, 0x84 masks). */
__attribute__((noinline)) int pushall(int n) {
  volatile int a = n;
#ifdef FP
  asm volatile("" ::: "r4", "r5", "r6", "r8", "r9", "r10");
#else
  asm volatile("" ::: "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11");
#endif
  sink((void *)&a, n);
  return a + 1;
}

/* Variable-length array and alloca: vsp = r7 / r11. */
__attribute__((noinline)) int vla(int n) {
  char buf[n];
  memset(buf, 1, n);
  sink(buf, n);
  return buf[0];
}
__attribute__((noinline)) int useal(int n) {
  char *p = alloca(n);
  sink(p, n);
  return p[1];
}

/* Large frames: vsp = vsp + uleb128 (0xb2). */
__attribute__((noinline)) int big(int n) {
  char buf[100000];
  sink(buf, n);
  return buf[5];
}
__attribute__((noinline)) int big2(int n) {
  char buf[1000];
  sink(buf, n);
  return buf[5];
}

/* VFP callee-saved d8-d15 live across a call (0xc9). */
__attribute__((noinline)) double vfp(double x) {
  double a = x * 2, b = x * 3, c = x * 4, d = x * 5, e = x * 6, f = x * 7, g = x * 8,
         h = x * 9;
  double r = dsink(x);
  return a + b + c + d + e + f + g + h + r;
}
__attribute__((noinline)) double vfp2(double x) {
  double a = x * 2;
  double r = dsink(x);
  return a + r;
}
