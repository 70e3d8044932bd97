// The latency tests' workload: calls of known duration and waits of known length.
//
// usage: latency CALLS PAUSE_MS HOLD_MS
//   pause_ms(PAUSE_MS) is called CALLS times: each call sleeps PAUSE_MS (a uprobe on it
//   measures that); then two threads take turns on a pthread mutex CALLS times: the holder
//   keeps it HOLD_MS while the other waits for it in the kernel (a futex wait of HOLD_MS).
//   `latency 0 0 0` waits for stdin to close instead (the probe-removal test keeps it
//   running, mapped, while it reads the probed code).
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(unsigned ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&t, &t) && errno == EINTR)
		;
}

__attribute__((noinline)) void pause_ms(unsigned ms)
{
	sleep_ms(ms);
	__asm__ volatile("" ::: "memory");
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t turn;
static unsigned calls, hold_ms;

static void *waiter(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < calls; i++) {
		pthread_barrier_wait(&turn); // the holder has the lock now
		pthread_mutex_lock(&lock);
		pthread_mutex_unlock(&lock);
		pthread_barrier_wait(&turn);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;

	if (argc != 4)
		return 2;
	calls = strtoul(argv[1], NULL, 0);
	hold_ms = strtoul(argv[3], NULL, 0);
	if (calls == 0) {
		char c;

		pause_ms(0);
		while (read(0, &c, 1) > 0)
			;
		return 0;
	}
	for (unsigned i = 0; i < calls; i++)
		pause_ms(strtoul(argv[2], NULL, 0));
	pthread_barrier_init(&turn, NULL, 2);
	pthread_create(&t, NULL, waiter, NULL);
	for (unsigned i = 0; i < calls; i++) {
		pthread_mutex_lock(&lock);
		pthread_barrier_wait(&turn);
		// The waiter reaches the futex wait well within this.
		sleep_ms(hold_ms);
		pthread_mutex_unlock(&lock);
		pthread_barrier_wait(&turn);
	}
	pthread_join(t, NULL);
	return 0;
}
