/* main -> a -> b -> c: c records its registers, a copy of its stack and each level's
   return address, which the test unwinds with the binary's EXIDX. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned ra_main, ra_a, ra_b, ra_c;
unsigned regs[16];
unsigned char stack_copy[8192];
unsigned stack_len, stack_end;

#define CAPTURE()                                                                  \
  asm volatile("str r0, [%0, #0]\n\tstr r1, [%0, #4]\n\tstr r2, [%0, #8]\n\t"      \
               "str r3, [%0, #12]\n\tstr r4, [%0, #16]\n\tstr r5, [%0, #20]\n\t"   \
               "str r6, [%0, #24]\n\tstr r7, [%0, #28]\n\tstr r8, [%0, #32]\n\t"   \
               "str r9, [%0, #36]\n\tstr r10, [%0, #40]\n\tstr r11, [%0, #44]\n\t" \
               "str r12, [%0, #48]\n\tmov r12, sp\n\tstr r12, [%0, #52]\n\t"       \
               "str lr, [%0, #56]\n\tmov r12, pc\n\tstr r12, [%0, #60]\n\t"        \
               :                                                                   \
               : "r"(regs)                                                         \
               : "r12", "memory")

/* Variable-length array: the frame is restored from r7 (Thumb) or r11 (Arm). */
__attribute__((noinline)) int c(int n) {
  volatile char buf[n];
  buf[0] = (char)n;
  ra_c = (unsigned)__builtin_return_address(0);
  CAPTURE();
  unsigned sp = regs[13];
  stack_len = stack_end - sp < sizeof stack_copy ? stack_end - sp : sizeof stack_copy;
  memcpy(stack_copy, (void *)sp, stack_len);
  return buf[0] + 1;
}

/* A frame larger than 0x204 bytes: vsp = vsp + uleb128 (0xb2). */
__attribute__((noinline)) int b(int n) {
  volatile char big[1200];
  big[n] = 1;
  ra_b = (unsigned)__builtin_return_address(0);
  int r = c(n + 16);
  return r + big[n];
}

/* r4-r11 and d8-d9 live across the call. */
__attribute__((noinline)) int a(int n) {
  double x = n * 1.5, y = n * 2.5;
  ra_a = (unsigned)__builtin_return_address(0);
  asm volatile("" ::: "r4", "r5", "r6", "r8", "r9", "r10");
  int r = b(n);
  return r + (int)(x * y);
}

static unsigned top_of_stack(unsigned sp) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  unsigned lo, hi, top = sp + sizeof stack_copy;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "%x-%x", &lo, &hi) == 2 && sp >= lo && sp < hi) top = hi;
  if (f) fclose(f);
  return top;
}

int main(int argc, char **argv) {
  unsigned here;
  asm volatile("mov %0, sp" : "=r"(here));
  stack_end = top_of_stack(here);
  ra_main = (unsigned)__builtin_return_address(0);
  int r = a(argc);
  FILE *out = fopen(argv[1], "wb");
  unsigned ras[4] = {ra_c, ra_b, ra_a, ra_main};
  if (!out || fwrite(regs, 4, 16, out) != 16 || fwrite(ras, 4, 4, out) != 4 ||
      fwrite(&stack_len, 4, 1, out) != 1 || fwrite(stack_copy, 1, stack_len, out) != stack_len)
    return 2;
  fclose(out);
  return r > 0 ? 0 : 3;
}
