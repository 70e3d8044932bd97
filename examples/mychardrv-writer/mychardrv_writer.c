// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * mychardrv-writer: drives /dev/mychardrv from a program of its own, the way an application
 * talks to its driver, so that a profile's call path goes from this program's functions
 * through libc's write() and the kernel's write path into the module:
 *
 *   main -> run_batches -> write_request -> write(2) -> ... -> mychardrv_write
 *
 * Built like an image's packages (-O2 -g, no frame pointers), installed stripped: only DWARF
 * unwinding on the host (kprofctl run --call-graph dwarf) recovers this path.
 *
 * Each batch is also a span on kprof's timeline (kprof/marker.h: "batch 1", "batch 2", ...),
 * recorded with `kprofctl run --markers`; `kprofctl report --time 'batch 2'` shows one.
 *
 * usage: mychardrv-writer [ITERATIONS [BATCHES [DEVICE]]]   (default 10000 4 /dev/mychardrv)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kprof/marker.h>

/* One request: the decimal iteration count the driver's write handler parses. */
static __attribute__((noinline)) int write_request(int fd, unsigned long iterations)
{
	char buf[24];
	int len = snprintf(buf, sizeof(buf), "%lu\n", iterations);

	if (write(fd, buf, (size_t)len) != len)
		return -1;
	return 0;
}

/* The work split into batches, one write each. */
static __attribute__((noinline)) int run_batches(int fd, unsigned long iterations,
						 unsigned long batches)
{
	unsigned long per = iterations / batches, i;

	for (i = 0; i < batches; i++) {
		char span[32];
		int failed;

		snprintf(span, sizeof(span), "batch %lu", i + 1);
		kprof_mark_begin(span);
		failed = write_request(fd, i + 1 < batches ? per : iterations - per * i);
		kprof_mark_end(span);
		if (failed)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long iterations = argc > 1 ? strtoul(argv[1], NULL, 0) : 10000;
	unsigned long batches = argc > 2 ? strtoul(argv[2], NULL, 0) : 4;
	const char *dev = argc > 3 ? argv[3] : "/dev/mychardrv";
	int fd;

	if (batches == 0 || batches > iterations) {
		fprintf(stderr, "mychardrv-writer: need 0 < BATCHES <= ITERATIONS\n");
		return 2;
	}
	fd = open(dev, O_WRONLY);
	if (fd < 0) {
		fprintf(stderr, "mychardrv-writer: %s: %s\n", dev, strerror(errno));
		return 1;
	}
	if (run_batches(fd, iterations, batches)) {
		fprintf(stderr, "mychardrv-writer: write to %s: %s\n", dev, strerror(errno));
		close(fd);
		return 1;
	}
	close(fd);
	return 0;
}
