// `pause N MS`: calls pause_ms(MS) N times; the latency tests probe pause_ms.
#include <errno.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) void pause_ms(unsigned ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&t, &t) && errno == EINTR)
		;
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? strtoul(argv[1], NULL, 0) : 1;
	unsigned ms = argc > 2 ? strtoul(argv[2], NULL, 0) : 10;

	for (unsigned i = 0; i < n; i++)
		pause_ms(ms);
	return 0;
}
