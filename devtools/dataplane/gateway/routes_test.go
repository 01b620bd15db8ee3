package main

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Every draw in [0, total) lands on exactly the backends' weights: 80 draws of 100 go to the
// stable pool and 20 to the canary, a weight of 0 gets none, and the order of the refs is kept.
func TestChooseBackendSplitsEveryDrawByWeight(t *testing.T) {
	cases := []struct {
		backends []backendRef
		want     []int
	}{
		{[]backendRef{{"glm52", 80}, {"glm52-canary", 20}}, []int{80, 20}},
		{[]backendRef{{"glm52", 100}, {"glm52-canary", 0}}, []int{100, 0}},
		{[]backendRef{{"glm52", 0}, {"glm52-canary", 100}}, []int{0, 100}},
		{[]backendRef{{"a", 1}, {"b", 0}, {"c", 3}}, []int{1, 0, 3}},
		{[]backendRef{{"only", 1}}, []int{1}},
	}
	for _, c := range cases {
		total := 0
		for _, b := range c.backends {
			total += b.Weight
		}
		got := make([]int, len(c.backends))
		for n := 0; n < total; n++ {
			i := chooseBackend(c.backends, func(limit int) int {
				if limit != total {
					t.Fatalf("%v: drew from [0, %d), want [0, %d)", c.backends, limit, total)
				}
				return n
			})
			if i < 0 {
				t.Fatalf("%v: draw %d chose no backend", c.backends, n)
			}
			got[i]++
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%v: backend %d got %d of %d draws, want %d", c.backends, i, got[i], total, c.want[i])
			}
		}
	}
}

// No weight above 0 (or no backend): nothing is chosen, and nothing is drawn.
func TestChooseBackendWithoutWeightChoosesNone(t *testing.T) {
	for _, backends := range [][]backendRef{nil, {{"glm52", 0}, {"glm52-canary", 0}}} {
		i := chooseBackend(backends, func(int) int { t.Fatal("drew without weight"); return 0 })
		if i != -1 {
			t.Errorf("%v: chose %d, want -1", backends, i)
		}
	}
}

// With the stand-in's own source of draws, 20% of 20000 requests go to the canary within four
// standard deviations of the binomial (sqrt(n p (1 - p)) = 56.6 requests).
func TestChooseBackendWithRandomDrawsMatchesTheWeights(t *testing.T) {
	backends := []backendRef{{"glm52", 80}, {"glm52-canary", 20}}
	draw := rand.New(rand.NewPCG(1, 2)).IntN
	const n = 20000
	canary := 0
	for k := 0; k < n; k++ {
		if chooseBackend(backends, draw) == 1 {
			canary++
		}
	}
	if tolerance := 4 * math.Sqrt(n*0.2*0.8); math.Abs(float64(canary)-n*0.2) > tolerance {
		t.Errorf("canary got %d of %d requests, want %.0f +- %.0f", canary, n, n*0.2, tolerance)
	}
}
