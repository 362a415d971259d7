package runtime

// RetryBudget is a share of calls that retries may spend (rule B3): each call's first
// attempt deposits, each later attempt withdraws, and a withdrawal that fails ends the
// call. middleware.NewTokenBudget makes the built-in one. Its methods must be safe for
// concurrent use.
type RetryBudget interface {
	Deposit()
	Withdraw() bool
}
