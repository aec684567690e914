// The sampler-floor benchmark's workload (scripts/sampler-floor.sh): fixed work shaped like a QUIC
// stack's on loopback (mostly UDP send/receive in the kernel, some user arithmetic, a 20-frame
// frame-pointer stack), and its own CPU time (user + system) printed in seconds. A sampler's cost
// is the extra CPU time the same work takes while it samples.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>

static int tx, rx;
static struct sockaddr_in dst;
static char buf[1200];
static volatile unsigned long sink;

__attribute__((noinline)) static void user_work(int n)
{
	unsigned long x = 0;
	for (int i = 0; i < n; i++)
		x = x * 6364136223846793005UL + (unsigned char)buf[i % sizeof buf];
	sink += x;
}

__attribute__((noinline)) static void leaf(void)
{
	for (int k = 0; k < 8; k++)
		sendto(tx, buf, sizeof buf, 0, (struct sockaddr *)&dst, sizeof dst);
	for (int k = 0; k < 8; k++)
		recv(rx, buf, sizeof buf, 0);
	user_work(4000);
}

__attribute__((noinline)) static void deep(int depth)
{
	if (depth == 0)
		leaf();
	else
		deep(depth - 1);
	sink++;
}

static double cpu_seconds(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char **argv)
{
	long iterations = argc > 1 ? atol(argv[1]) : 40000;
	struct sockaddr_in any = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof dst;
	int rcvbuf = 1 << 22;
	tx = socket(AF_INET, SOCK_DGRAM, 0);
	rx = socket(AF_INET, SOCK_DGRAM, 0);
	if (tx < 0 || rx < 0 || bind(rx, (struct sockaddr *)&any, sizeof any) != 0 ||
	    getsockname(rx, (struct sockaddr *)&dst, &len) != 0) {
		perror("udploop: socket setup");
		return 1;
	}
	setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	double start = cpu_seconds();
	for (long i = 0; i < iterations; i++)
		deep(20);
	printf("%.4f\n", cpu_seconds() - start);
	return 0;
}
