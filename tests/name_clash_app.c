/* An application's own key-value table whose functions have the names of rmastore's API:
 * store_init, store_put and store_get, with other signatures. This file does not include
 * rmastore's header, as an application's own module would not. */
#include <string.h>

enum { kEntries = 8 };
static const char *names[kEntries];
static int values[kEntries];
static int used = -1; /* -1: store_init not called */

int store_init(void) {
  used = 0;
  return 0;
}

int store_put(const char *name, int value) {
  if (used < 0 || used == kEntries) return -1;
  names[used] = name;
  values[used++] = value;
  return 0;
}

int store_get(const char *name) {
  for (int i = 0; i < used; ++i)
    if (strcmp(names[i], name) == 0) return values[i];
  return -1;
}

/* What the test calls from its other file, which sees rmastore's declarations instead. */
int app_table_works(void) {
  return store_init() == 0 && store_put("steps", 42) == 0 && store_put("atoms", 7) == 0 && store_get("steps") == 42 &&
         store_get("atoms") == 7 && store_get("none") == -1;
}
