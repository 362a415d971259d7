// Package sw is the module mutate's tests run the mutants gremlins cannot see in.
package sw

// Big is the least size Size calls big.
const Big = 5 * 2

// Size names n's size.
func Size(n int) string {
	switch {
	case n >= Big:
		return "big"
	case n > 0:
		return "small"
	}
	return "none"
}

// Odd is never tested.
func Odd(n int) bool {
	switch {
	case n%2 == 1:
		return true
	}
	return n < 0
}

// Fails reports whether f returns other than 0.
func Fails(f func() int) bool {
	if n := call(func() int { return f() }); n != 0 {
		return true
	}
	return false
}

func call(g func() int) int { return g() }
