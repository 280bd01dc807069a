package nftables

// Options says where and how Apply and Cleanup work.
type Options struct {
	// NetNS is an open file descriptor of the network namespace to program;
	// 0 is the namespace of the calling thread.
	NetNS int
	// Force writes the tables even when the kernel already holds them.
	Force bool
}

// Result says what Apply did.
type Result struct {
	// Changed is set when a transaction was committed; unset when the
	// kernel already held exactly the program.
	Changed bool
	// Removed lists the tables of ours that were deleted because the
	// program no longer has them.
	Removed []string
}
