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
 * PAUSE_MS (default 0) pauses that long between batches, in pause_between_batches(): a uprobe
 * on it, even in the stripped binary, times a known wait.
 *
 * usage: mychardrv-writer [ITERATIONS [BATCHES [DEVICE [PAUSE_MS]]]]
 *        (default 10000 4 /dev/mychardrv 0)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/*
 * 32-bit Arm kernels place uprobes on A32 instructions only (their uprobe decoder has no
 * Thumb), and armhf toolchains emit Thumb-2 by default: a function to be timed with
 * `kprofctl run --latency PROGRAM:FUNC` there is built as A32, as this one is, and so is its
 * caller: the return probe resumes the caller in A32 state, and a Thumb caller then faults
 * (SIGSEGV, measured on the armv7 board's 6.1 kernel).
 */
#if defined(__arm__)
#define UPROBE_TIMED __attribute__((target("arm")))
#else
#define UPROBE_TIMED
#endif

/*
 * The pause between two batches. nanosleep, restarted with the time left when a signal
 * interrupts it, so that the whole call lasts `ms` however the process is signalled.
 */
static __attribute__((noinline)) UPROBE_TIMED void pause_between_batches(unsigned int ms)
{
	struct timespec left = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&left, &left) != 0 && errno == EINTR)
		;
}

/*
 * The work split into batches, one write each, `pause_ms` apart. UPROBE_TIMED as the caller
 * of pause_between_batches().
 */
static __attribute__((noinline)) UPROBE_TIMED int run_batches(int fd, unsigned long iterations,
							      unsigned long batches, unsigned int pause_ms)
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
		if (pause_ms && i + 1 < batches)
			pause_between_batches(pause_ms);
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long iterations = argc > 1 ? strtoul(argv[1], NULL, 0) : 10000;
	unsigned long batches = argc > 2 ? strtoul(argv[2], NULL, 0) : 4;
	const char *dev = argc > 3 ? argv[3] : "/dev/mychardrv";
	unsigned int pause_ms = argc > 4 ? (unsigned int)strtoul(argv[4], NULL, 0) : 0;
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
	if (run_batches(fd, iterations, batches, pause_ms)) {
		fprintf(stderr, "mychardrv-writer: write to %s: %s\n", dev, strerror(errno));
		close(fd);
		return 1;
	}
	close(fd);
	return 0;
}
