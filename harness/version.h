#ifndef KB_VERSION_H
#define KB_VERSION_H
#define KVBENCH_VERSION "0.1.0"
const char *kb_version(void);
/* `git describe --always --dirty --abbrev=12` of the source tree at build time. */
const char *kb_git_desc(void);
#endif
