package runtime

// Version is the version of this client runtime, in semantic-versioning form.
const Version = "0.1.0"

// IsAtLeastVersion0_1_0 is referred to by code that zarisgen generates
// (gen/zarisclient: const _ = runtime.IsAtLeastVersion0_1_0), so that generated code
// needing a newer runtime than the one it is compiled against fails to build with an error
// naming the constant, instead of failing at run time or with a confusing type error. A
// runtime release that changes what generated code relies on adds a new constant; the
// old ones stay, so older generated code keeps building against a newer runtime.
//
// Do not refer to it from hand-written code.
const IsAtLeastVersion0_1_0 = true
