/* Workload of ci/bench/report-memory: the same functions and call paths for as many seconds
 * as asked, so that a longer recording adds samples and nothing else. Linked statically and
 * stopped by alarm() rather than by timeout(1) or clock_gettime(), so that no other image
 * (ld.so, libc.so, the vDSO, timeout) gets samples by chance in one recording and not in the
 * other. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static volatile uint64_t sink;

static void on_alarm(int sig)
{
	(void)sig;
	stop = 1;
}

__attribute__((noinline)) static uint64_t mix(uint64_t n)
{
	uint64_t acc = 0;
	for (uint64_t i = 0; i < n; i++)
		acc += (i * 2654435761u) ^ (acc >> 3);
	return acc;
}

__attribute__((noinline)) static uint64_t lcg(uint64_t n)
{
	uint64_t acc = 1;
	for (uint64_t i = 0; i < n; i++)
		acc = acc * 6364136223846793005u + i;
	return acc;
}

__attribute__((noinline)) static uint64_t left(uint64_t n)
{
	return mix(n) + lcg(n / 2);
}

__attribute__((noinline)) static uint64_t right(uint64_t n)
{
	return lcg(n) ^ mix(n / 4);
}

int main(int argc, char **argv)
{
	unsigned seconds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 1;
	signal(SIGALRM, on_alarm);
	alarm(seconds);
	while (!stop)
		sink += left(100000) + right(100000);
	return 0;
}
