#ifndef KB_VERSION_H
#define KB_VERSION_H
#define KVBENCH_VERSION "0.1.0"
#endif
