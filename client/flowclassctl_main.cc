#include <cstdio>

int main(int argc, char** argv) {
  (void)argc;
  (void)argv;
  std::fprintf(stderr, "flowclassctl: not yet\n");
  return 2;
}
