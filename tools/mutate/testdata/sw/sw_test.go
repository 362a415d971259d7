package sw

import "testing"

func TestSize(t *testing.T) {
	for n, want := range map[int]string{10: "big", 9: "small", 1: "small", 0: "none"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFails(t *testing.T) {
	if !Fails(func() int { return 1 }) || Fails(func() int { return 0 }) {
		t.Error("Fails does not tell 1 from 0")
	}
}
