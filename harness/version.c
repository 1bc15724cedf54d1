/* version.c - the build's version and git commit (for run.json). The Makefile
 * passes KB_GIT_DESC (git describe --always --dirty) and rebuilds this file
 * whenever it changes. */
#include "harness/version.h"

#ifndef KB_GIT_DESC
#define KB_GIT_DESC "unknown"
#endif

const char *kb_version(void) { return KVBENCH_VERSION; }
const char *kb_git_desc(void) { return KB_GIT_DESC; }
