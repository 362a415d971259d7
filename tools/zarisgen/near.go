package main

import "strings"

// nearAnnotation returns the annotation of known that key is a near miss of: another
// separator after "zaris" (zaris_guards), another case, or at most two letters typed
// wrong, left out, added or swapped (zairs.guards). It returns "" when key is far from all.
func nearAnnotation(key string, known []string) string {
	for _, k := range known {
		if key == k {
			return ""
		}
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// didYouMean is `, did you mean "near"?` or "".
func didYouMean(near string) string {
	if near == "" {
		return ""
	}
	return ` (did you mean "` + near + `"?)`
}

// editDistance is the optimal-string-alignment distance of a and b: insertions, deletions,
// substitutions and swaps of neighbours each count one.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
