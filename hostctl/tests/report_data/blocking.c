// Off-CPU workload of known blocked time (issue 15): `blocking sleep N MS` calls nanosleep
// N times for MS ms from sleep_in_known_function(); `blocking pipe N MS` reads N bytes one at
// a time from a pipe in wait_on_pipe() while an interval timer's SIGALRM handler writes one
// byte every MS ms. Either way the thread is blocked (state S) for about N x MS ms on a path
// through the named function, and on the CPU for almost none of it. It prints the time it
// measured around the blocking calls (`blocked_ns=...`): on a loaded machine a 20 ms sleep
// takes longer than 20 ms, and that measured time is the known value a profiler must find.
//
// The system calls are made here, not through libc: Debian's libc is built without frame
// pointers, and a frame-pointer call chain through its nanosleep() would skip the caller.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

static long raw_syscall3(long nr, long a, long b, long c)
{
	long ret;
#if defined(__x86_64__)
	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	__asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	ret = x0;
#else
	ret = syscall(nr, a, b, c);
#endif
	return ret;
}

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long blocked_ns;

static int pipe_fds[2];

__attribute__((noinline)) void sleep_in_known_function(int n, long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	for (int i = 0; i < n; i++) {
		struct timespec left = ts;
		long long t0 = now_ns();

		while (raw_syscall3(SYS_nanosleep, (long)&left, (long)&left, 0) == -EINTR)
			;
		blocked_ns += now_ns() - t0;
	}
	__asm__ volatile("" ::: "memory");
}

static void on_alarm(int sig)
{
	(void)sig;
	char b = 'x';
	(void)!write(pipe_fds[1], &b, 1);
}

__attribute__((noinline)) void wait_on_pipe(int n, long ms)
{
	struct sigaction sa;
	struct itimerval it = { { ms / 1000, (ms % 1000) * 1000 }, { ms / 1000, (ms % 1000) * 1000 } };

	if (pipe(pipe_fds) != 0)
		exit(2);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (int i = 0; i < n; i++) {
		char b;
		long long t0 = now_ns();
		long r;

		while ((r = raw_syscall3(SYS_read, pipe_fds[0], (long)&b, 1)) == -EINTR)
			;
		if (r != 1)
			exit(3);
		blocked_ns += now_ns() - t0;
	}
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: blocking sleep|pipe N MS\n");
		return 1;
	}
	int n = atoi(argv[2]);
	long ms = atol(argv[3]);

	if (strcmp(argv[1], "sleep") == 0)
		sleep_in_known_function(n, ms);
	else
		wait_on_pipe(n, ms);
	printf("blocked_ns=%lld\n", blocked_ns);
	return 0;
}
