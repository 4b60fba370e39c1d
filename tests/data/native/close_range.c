#define _GNU_SOURCE
#include <unistd.h>
int stub_close_all(void) { return close_range(3, ~0U, 0); }
