// LeakSanitizer suppressions of the test programs that open DEV=CL (linked into each of them).
//
// WORKAROUND(PoCL 3.1): its pthread device leaks the LLVM pass objects of each work-group
// function it compiles (pocl_check_kernel_disk_cache, on a cold kernel cache); LeakSanitizer in
// the ASan pass would fail the suites on them. Only stacks through libpocl are suppressed.
extern "C" const char* __lsan_default_suppressions() { return "leak:libpocl.so\n"; }
