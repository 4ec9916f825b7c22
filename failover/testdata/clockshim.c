/*
 * clockshim: an LD_PRELOAD library that sets a process's wall clock back by
 * CLOCKSHIM_OFFSET_US microseconds (CLOCK_REALTIME, gettimeofday, time);
 * monotonic clocks are left alone. The failover suite builds it with the C
 * compiler and runs a Redis replica under it, so that the replica it
 * promotes has a clock behind the old master's.
 *
 * Debian's libfaketime 0.9.10 cannot be used for this: under Debian's
 * redis-server 7.0 it stops at start with "Cannot recover from unexpected
 * recursive calls to clock_gettime()" (jemalloc reads the clock before
 * libfaketime is initialised). This shim calls the kernel directly, never
 * dlsym or malloc, so it has no such recursion.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_us(void) {
	static long long off = -1;
	if (off < 0) {
		const char *s = getenv("CLOCKSHIM_OFFSET_US");
		off = s ? atoll(s) : 0;
	}
	return off;
}

static int is_realtime(clockid_t id) {
	return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	int rc = (int)syscall(SYS_clock_gettime, id, ts);
	if (rc == 0 && ts && is_realtime(id)) {
		long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec - offset_us() * 1000LL;
		ts->tv_sec = ns / 1000000000LL;
		ts->tv_nsec = ns % 1000000000LL;
	}
	return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
	struct timespec ts;
	int rc = clock_gettime(CLOCK_REALTIME, &ts);
	if (rc == 0 && tv) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	(void)tz;
	return rc;
}

time_t time(time_t *t) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (t) *t = ts.tv_sec;
	return ts.tv_sec;
}
