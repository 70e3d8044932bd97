/* Test workload for kprof-agent: one known hot function, built with frame pointers.
 * usage: busy [ROUNDS]  (default 50; one round is 20 million iterations of hot(), ~10-20 ms).
 * The amount of work is fixed rather than timed: reading the clock in a loop makes the
 * samples pile up in clock_gettime on VMs where timer interrupts are delivered on exits. */
#include <stdlib.h>

volatile unsigned long sink;

__attribute__((noinline)) unsigned long hot(unsigned long n)
{
	unsigned long x = 0;
	for (unsigned long i = 0; i < n; i++)
		x += (i * i) ^ (x >> 3);
	return x;
}

__attribute__((noinline)) void cold(void)
{
	sink += 1;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 50;
	for (long r = 0; r < rounds; r++) {
		/* The volatile read keeps the compiler from hoisting the pure call out of the loop. */
		sink += hot(20000000 + (sink & 1));
		cold();
	}
	return 0;
}
