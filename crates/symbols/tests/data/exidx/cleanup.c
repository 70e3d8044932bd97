/* Cleanups under -fexceptions: the entries go to .ARM.extab with the generic personality
   routine __gcc_personality_v0 and GCC's opcode layout after it. Linked statically, so that
   readelf names the routine (through a PLT it would not decode the opcodes). */
__attribute__((noipa)) void sink(void *p, int n) { asm volatile("" ::"r"(p), "r"(n) : "memory"); }
static void cl(int *p) { sink(p, *p); }
__attribute__((noinline)) int withcleanup(int n) {
  int x __attribute__((cleanup(cl))) = n;
  sink(&x, n);
  return x;
}
__attribute__((noinline)) int withcleanup_vla(int n) {
  int x __attribute__((cleanup(cl))) = n;
  char buf[n];
  sink(buf, n);
  sink(&x, n);
  return x + buf[0];
}
int main(int argc, char **argv) { return withcleanup(argc) + withcleanup_vla(argc + 8) > 0 ? 0 : 1; }
