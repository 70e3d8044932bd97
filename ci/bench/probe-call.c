// `probe-call N`: calls probe_me() N times. probe_me does nothing that takes time, so what a
// probe adds to each call is all there is to see (ci/bench/probe-overhead).
#include <stdlib.h>

__attribute__((noinline)) int probe_me(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 0) : 100000;
	int s = 0;

	for (long i = 0; i < n; i++)
		s = probe_me(s);
	return s == 42;
}
