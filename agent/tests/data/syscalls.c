/* Kernel-heavy test workload: copies from /dev/zero through read(2) for SECONDS (default 2),
 * so most samples land in the kernel under a user call chain reader() -> read(). */
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 20];

__attribute__((noinline)) long reader(int fd)
{
	long total = 0;
	for (int i = 0; i < 64; i++)
		total += read(fd, buf, sizeof buf);
	return total;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	int fd = open("/dev/zero", O_RDONLY);
	if (fd < 0)
		return 1;
	struct timespec t0, t;
	long total = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		total += reader(fd);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	return total > 0 ? 0 : 1;
}
