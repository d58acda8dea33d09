/* The command line of the C examples. Every rank has the same arguments and finds the same
 * mistake: rank 0 prints it, with the usage, and every rank leaves MPI and exits with status 2.
 * Call cli_init() after MPI_Init, then getopt_long with ":h" and opterr = 0, handing every case
 * that is not an option of the example to cli_other(). */
#pragma once

#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *cli_program = "example", *cli_usage = "";
static int cli_rank;

static void cli_init(const char *program, const char *usage, int rank) {
  cli_program = program;
  cli_usage = usage;
  cli_rank = rank;
  opterr = 0; /* mistakes are reported once, by usage_error */
}

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...) {
  if (cli_rank == 0) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", cli_program);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n%s", cli_usage);
    va_end(ap);
  }
  MPI_Finalize();
  exit(2);
}

/* The whole of `text` as a base-10 integer in [min, max], or a usage error. */
static int int_arg(const char *option, const char *text, long min, long max) {
  char *end;
  errno = 0;
  const long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || v < min || v > max)
    usage_error("%s needs a whole number from %ld to %ld, not '%s'", option, min, max, text);
  return (int)v;
}

/* What getopt_long returned that is not an option of the example: --help (the usage, status 0),
 * an option without its value, or an unknown option. */
static void cli_other(int c, char **argv) __attribute__((noreturn));
static void cli_other(int c, char **argv) {
  if (c == 'h') {
    if (cli_rank == 0) fputs(cli_usage, stdout);
    MPI_Finalize();
    exit(0);
  }
  if (c == ':') usage_error("option '%s' needs a value", argv[optind - 1]);
  if (optopt > 0 && optopt < 256) usage_error("unknown option '-%c'", optopt);
  usage_error("unknown option '%s'", argv[optind - 1]);
}

/* After the options: no operand is expected. */
static void cli_no_operands(int argc, char **argv) {
  if (optind < argc) usage_error("unexpected argument '%s'", argv[optind]);
}
