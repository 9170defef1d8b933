/*
 * The local cluster's pod sandbox process: holds the pod's namespaces open,
 * reaps the zombies it inherits as pid 1, and exits 0 on SIGINT or SIGTERM.
 * Built statically so the image needs nothing else.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig)
{
	(void)sig;
	_exit(0);
}

static void on_child(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(int argc, char **argv)
{
	struct sigaction sa;

	if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		puts("otelcol-ai-cluster pause 1");
		return 0;
	}
	if (getpid() != 1)
		fputs("pause: not pid 1; zombies of other processes are not reaped\n", stderr);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0)
		return 1;
	sa.sa_handler = on_child;
	sa.sa_flags = SA_NOCLDSTOP;
	if (sigaction(SIGCHLD, &sa, NULL) < 0)
		return 2;
	for (;;)
		pause();
}
