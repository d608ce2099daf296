/* tfb_roundrun: times rounds of N separate processes.
 *
 * A round: N children are forked first and block on a pipe; then the clock
 * starts and the pipe is closed, so all N exec the command at once; the round
 * ends when the last one has exited. The time from the release of the pipe
 * to the last exit is the round time. In the arguments, %r becomes the round
 * number (unique within this run, warm-up included), %i the child's index
 * and %n N; the same values are in TFB_ROUND, TFB_RANK and TFB_N.
 *
 *   tfb_roundrun -n N [-r ROUNDS] [-w WARMUP] [-t ROUND_TIMEOUT_S] [-b BUDGET_S]
 *                [-x EXPECTED_EXIT] [-p ROUND_PREFIX] -- command [args...]
 *
 * Prints one line: "ROUNDS n=N done=K failed=F median_ms=... min_ms=...
 * max_ms=... times_ms=a,b,...". A round whose children do not all exit with
 * EXPECTED_EXIT (default 0) is failed; a round past ROUND_TIMEOUT_S has its
 * children (each in its own process group) killed. After BUDGET_S seconds of
 * rounds, no new round starts. Exit status 0 when no round failed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static volatile sig_atomic_t alarmed;
static void on_alarm(int sig) {
  (void)sig;
  alarmed = 1;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* Replaces %r, %i, %n in s. */
static char* expand(const char* s, const char* r, const char* i, const char* n) {
  size_t cap = strlen(s) * 4 + 64, len = 0;
  char* out = malloc(cap);
  for (const char* p = s; *p; ++p) {
    const char* sub = NULL;
    if (p[0] == '%' && (p[1] == 'r' || p[1] == 'i' || p[1] == 'n')) sub = p[1] == 'r' ? r : p[1] == 'i' ? i : n;
    if (sub) {
      size_t l = strlen(sub);
      if (len + l + 1 > cap) out = realloc(out, cap = (len + l + 1) * 2);
      memcpy(out + len, sub, l);
      len += l;
      ++p;
    } else {
      if (len + 2 > cap) out = realloc(out, cap *= 2);
      out[len++] = *p;
    }
  }
  out[len] = '\0';
  return out;
}

int main(int argc, char** argv) {
  long n = 0, rounds = 5, warmup = 1, expect = 0;
  double round_timeout = 120, budget = 0;
  const char* prefix = "";
  int opt;
  while ((opt = getopt(argc, argv, "+n:r:w:t:b:x:p:")) != -1) {
    switch (opt) {
      case 'n': n = strtol(optarg, NULL, 10); break;
      case 'r': rounds = strtol(optarg, NULL, 10); break;
      case 'w': warmup = strtol(optarg, NULL, 10); break;
      case 't': round_timeout = strtod(optarg, NULL); break;
      case 'b': budget = strtod(optarg, NULL); break;
      case 'x': expect = strtol(optarg, NULL, 10); break;
      case 'p': prefix = optarg; break;
      default: goto usage;
    }
  }
  if (n <= 0 || n > 100000 || rounds <= 0 || warmup < 0 || optind >= argc) {
  usage:
    fprintf(stderr, "usage: tfb_roundrun -n N [-r ROUNDS] [-w WARMUP] [-t ROUND_TIMEOUT_S] [-b BUDGET_S] "
                    "[-x EXPECTED_EXIT] [-p PREFIX] -- command [args...]\n");
    return 2;
  }
  char** cmd = argv + optind;
  int cmd_argc = argc - optind;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm; /* no SA_RESTART: waitpid returns EINTR */
  sigaction(SIGALRM, &sa, NULL);

  pid_t* pids = calloc((size_t)n, sizeof *pids);
  double* times = calloc((size_t)rounds, sizeof *times);
  long done = 0, failed = 0;
  double started = now_ms();
  char first_failure[256] = "";
  for (long r = 1; r <= warmup + rounds; ++r) {
    if (budget > 0 && r > warmup + 1 && now_ms() - started > budget * 1e3) break;
    int go[2], ready[2];
    if (pipe2(go, O_CLOEXEC) != 0 || pipe2(ready, O_CLOEXEC) != 0) {
      perror("tfb_roundrun: pipe");
      return 1;
    }
    char rs[64], ns[32];
    snprintf(rs, sizeof rs, "%s%ld", prefix, r);
    snprintf(ns, sizeof ns, "%ld", n);
    long forked = 0;
    for (long i = 0; i < n; ++i) {
      pid_t p = fork();
      if (p < 0) {
        perror("tfb_roundrun: fork");
        break;
      }
      if (p == 0) {
        setpgid(0, 0);
        char is[32];
        snprintf(is, sizeof is, "%ld", i);
        char** av = calloc((size_t)cmd_argc + 1, sizeof *av);
        for (int k = 0; k < cmd_argc; ++k) av[k] = expand(cmd[k], rs, is, ns);
        setenv("TFB_ROUND", rs, 1);
        setenv("TFB_RANK", is, 1);
        setenv("TFB_N", ns, 1);
        close(go[1]);
        close(ready[0]);
        (void)!write(ready[1], "r", 1);
        close(ready[1]);
        char c;
        while (read(go[0], &c, 1) < 0 && errno == EINTR) {
        }
        execvp(av[0], av);
        fprintf(stderr, "tfb_roundrun: cannot run %s: %s\n", av[0], strerror(errno));
        _exit(127);
      }
      pids[forked++] = p;
    }
    close(go[0]);
    close(ready[1]);
    /* Wait until every child is blocked on the pipe. */
    long ready_count = 0;
    char buf[256];
    ssize_t got;
    while (ready_count < forked && (got = read(ready[0], buf, sizeof buf)) != 0) {
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) break;
      ready_count += got;
    }
    close(ready[0]);
    double t0 = now_ms();
    close(go[1]); /* all start now */
    alarmed = 0;
    alarm((unsigned)(round_timeout + 0.999));
    long left = forked, bad = forked < n ? 1 : 0;
    while (left > 0) {
      int st;
      pid_t p = waitpid(-1, &st, 0);
      if (p < 0) {
        if (errno == EINTR && alarmed) {
          for (long i = 0; i < forked; ++i)
            if (pids[i] > 0) kill(-pids[i], SIGKILL); /* the child's own process group */
          snprintf(first_failure, sizeof first_failure, "round %ld timed out after %.0f s with %ld still running", r,
                   round_timeout, left);
          bad = 1;
          alarmed = 0;
          continue;
        }
        if (errno == EINTR) continue;
        break;
      }
      for (long i = 0; i < forked; ++i)
        if (pids[i] == p) pids[i] = 0;
      --left;
      int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (code != expect) {
        if (!bad && !first_failure[0])
          snprintf(first_failure, sizeof first_failure, "round %ld: a child exited with %d", r, code);
        bad = 1;
      }
    }
    double t1 = now_ms();
    alarm(0);
    if (r <= warmup) continue;
    if (bad) {
      ++failed;
      continue;
    }
    times[done++] = t1 - t0;
  }
  printf("ROUNDS n=%ld done=%ld failed=%ld", n, done, failed);
  if (done > 0) {
    double* sorted = malloc((size_t)done * sizeof *sorted);
    memcpy(sorted, times, (size_t)done * sizeof *sorted);
    qsort(sorted, (size_t)done, sizeof *sorted, cmp_double);
    double median = done % 2 ? sorted[done / 2] : (sorted[done / 2 - 1] + sorted[done / 2]) / 2;
    printf(" median_ms=%.3f min_ms=%.3f max_ms=%.3f times_ms=", median, sorted[0], sorted[done - 1]);
    for (long i = 0; i < done; ++i) printf("%s%.3f", i ? "," : "", times[i]);
  }
  printf("\n");
  if (first_failure[0]) fprintf(stderr, "tfb_roundrun: %s\n", first_failure);
  return failed ? 1 : 0;
}
