/* Two functions with a known share of the work (5:1), for reports of perf.data files that
 * recorded no build-ids (issue 24). */
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline)) void big_one(unsigned long n)
{
	for (unsigned long i = 0; i < n * 5; i++)
		sink += i;
}

__attribute__((noinline)) void small_one(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i;
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 40000000;

	big_one(n);
	small_one(n);
	return 0;
}
