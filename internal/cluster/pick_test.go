package cluster

import "testing"

func TestPickTwo(t *testing.T) {
	cases := []struct {
		load []int64
		i, j int
		want int
	}{
		{[]int64{0, 0}, 0, 1, 0},       // a tie keeps the first choice
		{[]int64{5, 1}, 0, 1, 1},       // the lesser queue wins
		{[]int64{1, 5}, 0, 1, 0},       //
		{[]int64{9, 3, 7}, 2, 0, 2},    // only the two choices count
		{[]int64{9, 3, 7}, 0, 2, 2},    //
		{[]int64{100, 0, 0}, 1, 2, 1},  //
		{[]int64{0, 100, 50}, 1, 2, 2}, //
	}
	for _, c := range cases {
		if got := PickTwo(c.load, c.i, c.j); got != c.want {
			t.Errorf("PickTwo(%v, %d, %d) = %d, want %d", c.load, c.i, c.j, got, c.want)
		}
	}
}

func TestTwoOfDistinctAndCovering(t *testing.T) {
	for n := 2; n <= 5; n++ {
		seen := map[[2]int]bool{}
		for r := uint64(0); r < 1000; r++ {
			i, j := twoOf(n, r)
			if i == j || i < 0 || j < 0 || i >= n || j >= n {
				t.Fatalf("twoOf(%d, %d) = %d, %d", n, r, i, j)
			}
			seen[[2]int{i, j}] = true
		}
		if len(seen) != n*(n-1) {
			t.Errorf("n=%d: %d ordered pairs seen, want %d", n, len(seen), n*(n-1))
		}
	}
}
