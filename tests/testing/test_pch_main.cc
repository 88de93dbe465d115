// Owner of the tests' shared precompiled header (tests/CMakeLists.txt); the
// program itself does nothing.
int main() { return 0; }
