/* An out-of-tree C program against the installed jtree (tests/install/test_consumers.sh):
 *   read_leaf_c FILE KEY_PATH OUT     writes the leaf's bytes (as in memory) to OUT. */
#include <stdio.h>
#include <stdlib.h>

#include <jtree/c.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s FILE KEY_PATH OUT\n", argv[0]);
    return 2;
  }
  jtree_reader_t* r = NULL;
  jtree_error_t* err = NULL;
  uint32_t leaf = 0;
  uint64_t bytes = 0;
  void* buf = NULL;
  int rc = 1;
  if (jtree_reader_open(argv[1], NULL, &r, &err) != JTREE_OK ||
      jtree_reader_find_leaf(r, argv[2], &leaf, &err) != JTREE_OK ||
      jtree_reader_leaf_memory_bytes(r, leaf, &bytes, &err) != JTREE_OK) {
    fprintf(stderr, "%s\n", jtree_error_message(err));
    goto done;
  }
  buf = malloc(bytes ? bytes : 1);
  if (jtree_reader_read(r, leaf, buf, bytes, &err) != JTREE_OK) {
    fprintf(stderr, "%s\n", jtree_error_message(err));
    goto done;
  }
  FILE* out = fopen(argv[3], "wb");
  if (!out || fwrite(buf, 1, bytes, out) != bytes || fclose(out) != 0) {
    perror(argv[3]);
    goto done;
  }
  printf("%s: %s %llu bytes (jtree %s)\n", argv[1], argv[2], (unsigned long long)bytes,
         jtree_version());
  rc = 0;
done:
  free(buf);
  jtree_error_free(err);
  jtree_reader_close(r);
  return rc;
}
