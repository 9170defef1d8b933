package main

// An isolation forest (Liu, Ting and Zhou, 2008) over the runtime-overlap
// fractions of spans, trained deterministically and encoded as ONNX-ML's
// TreeEnsembleRegressor. Each tree isolates points of a random subsample by
// random splits; points unlike the training data are isolated in few
// splits, so the mean path length over the trees is short and the score
// 2^(-E[h]/c(ψ)) is close to 1. Ordinary points score about 0.5 or less.

import (
	"math"
)

// forestFeatures names the columns the trees split on: the overlap of each
// window kind as a fraction of the span's duration. Fractions, unlike
// milliseconds, mean the same in a 2 ms and a 2 s request.
var forestFeatures = []string{
	"jvm_safepoint_fraction",
	"jvm_gc_pause_fraction",
	"python_gil_wait_fraction",
	"python_gc_pause_fraction",
}

// minDurationMs is the graph's floor on the denominator of a fraction.
const minDurationMs float32 = 0.001

// fractions computes the trees' input from a row exactly as the graph does,
// in float32: overlap / max(duration, minDurationMs).
func fractions(r row) [4]float32 {
	d := max(r[0], minDurationMs)
	var f [4]float32
	for i := range f {
		f[i] = r[i+1] / d
	}
	return f
}

// forestParams are an isolation forest's hyperparameters.
type forestParams struct {
	Trees      int    // number of trees
	SampleSize int    // ψ, the subsample each tree is grown on
	Seed       uint64 // seeds the splits; the same data and seed give the same forest
}

// defaultForest are the paper's recommended values: 100 trees of 256 points.
var defaultForest = forestParams{Trees: 100, SampleSize: 256, Seed: 1}

// isoNode is a node of a tree, in preorder; a leaf has left == -1.
type isoNode struct {
	feature     int
	threshold   float32 // x[feature] < threshold goes left
	left, right int
	// pathLength is, for a leaf, its depth plus c(size): the expected
	// further depth had the tree gone on splitting its size points.
	pathLength float64
}

type isoTree []isoNode

type isoForest struct {
	trees      []isoTree
	sampleSize int
}

// trainForest grows the forest on points.
func trainForest(points [][4]float32, p forestParams) isoForest {
	rng := splitmix64(p.Seed)
	psi := min(p.SampleSize, len(points))
	limit := int(math.Ceil(math.Log2(float64(max(psi, 2)))))
	f := isoForest{sampleSize: psi}
	// The domain of each fraction: [0, 1], or up to the largest value seen
	// (GIL waits summed over threads exceed the request).
	var bound [4]float32
	for k := range bound {
		bound[k] = 1
		for _, x := range points {
			bound[k] = max(bound[k], x[k])
		}
	}
	idx := make([]int, len(points))
	for t := 0; t < p.Trees; t++ {
		// A sample without replacement: a partial Fisher-Yates shuffle.
		for i := range idx {
			idx[i] = i
		}
		for i := 0; i < psi; i++ {
			j := i + int(rng.next()%uint64(len(idx)-i))
			idx[i], idx[j] = idx[j], idx[i]
		}
		sample := make([][4]float32, psi)
		for i := range sample {
			sample[i] = points[idx[i]]
		}
		var tree isoTree
		grow(&tree, sample, bound, 0, limit, &rng)
		f.trees = append(f.trees, tree)
	}
	return f
}

// grow appends the subtree isolating points at depth and returns its index.
//
// A split picks a feature at random and a threshold uniformly between the
// points' smallest and largest values of it, as in the paper. A feature on
// which every point here has the same value v is split too, between v and
// the feature's domain bound: the points all go left and the right leaf is
// empty. Without that, a feature that never varied in healthy data (Python
// GC pauses are rare) would never be split on, and a span spent entirely
// in one would look ordinary.
func grow(tree *isoTree, points [][4]float32, bound [4]float32, depth, limit int, rng *splitmix64) int {
	at := len(*tree)
	*tree = append(*tree, isoNode{left: -1, right: -1})
	leaf := func() int {
		(*tree)[at].pathLength = float64(depth) + averagePathLength(len(points))
		return at
	}
	if depth >= limit || len(points) <= 1 {
		return leaf()
	}
	var lo, hi [4]float32
	var splittable []int
	for k := range lo {
		lo[k], hi[k] = points[0][k], points[0][k]
		for _, x := range points[1:] {
			lo[k], hi[k] = min(lo[k], x[k]), max(hi[k], x[k])
		}
		if lo[k] == hi[k] {
			hi[k] = bound[k]
		}
		if lo[k] < hi[k] {
			splittable = append(splittable, k)
		}
	}
	if len(splittable) == 0 {
		return leaf()
	}
	k := splittable[rng.next()%uint64(len(splittable))]
	t := float32(float64(lo[k]) + rng.float64()*(float64(hi[k])-float64(lo[k])))
	if t <= lo[k] || t > hi[k] {
		t = hi[k] // keeps the points' smallest value on the left
	}
	var left, right [][4]float32
	for _, x := range points {
		if x[k] < t {
			left = append(left, x)
		} else {
			right = append(right, x)
		}
	}
	(*tree)[at].feature, (*tree)[at].threshold = k, t
	l := grow(tree, left, bound, depth+1, limit, rng)
	r := grow(tree, right, bound, depth+1, limit, rng)
	(*tree)[at].left, (*tree)[at].right = l, r
	return at
}

// averagePathLength is c(n), the mean depth of an unsuccessful search in a
// binary search tree of n points: how much deeper a leaf of n points would
// have grown.
func averagePathLength(n int) float64 {
	switch {
	case n <= 1:
		return 0
	case n == 2:
		return 1
	}
	harmonic := math.Log(float64(n-1)) + 0.5772156649015329
	return 2*harmonic - 2*float64(n-1)/float64(n)
}

// meanPathLength is E[h(x)] over the trees, summed in float32 as ONNX
// Runtime's tree ensemble does with the per-tree weights the model carries.
func (f isoForest) meanPathLength(x [4]float32) float32 {
	var sum float32
	for _, tree := range f.trees {
		n := 0
		for tree[n].left >= 0 {
			if x[tree[n].feature] < tree[n].threshold {
				n = tree[n].left
			} else {
				n = tree[n].right
			}
		}
		sum += float32(tree[n].pathLength / float64(len(f.trees)))
	}
	return sum
}

// scoreFactor is what the mean path length is multiplied by before Exp:
// score = 2^(-E[h]/c(ψ)) = exp(E[h] · (-ln 2 / c(ψ))).
func (f isoForest) scoreFactor() float32 {
	return float32(-math.Ln2 / averagePathLength(f.sampleSize))
}

// score is the anomaly score in (0, 1).
func (f isoForest) score(x [4]float32) float64 {
	return math.Exp(float64(f.meanPathLength(x) * f.scoreFactor()))
}

// splitmix64 is a small, fully specified generator, so that a forest is the
// same on every platform and Go release.
type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float64 returns a number in [0, 1).
func (s *splitmix64) float64() float64 {
	return float64(s.next()>>11) / (1 << 53)
}

// node encodes the forest as an ONNX-ML TreeEnsembleRegressor that maps
// input [N, 4] to the mean path length [N, 1]: every leaf carries its path
// length divided by the number of trees, and the trees' leaves are summed.
func (f isoForest) node(input, output string) nodeProto {
	var treeIDs, nodeIDs, featureIDs, trueIDs, falseIDs []int64
	var values []float32
	var modes []string
	var targetTrees, targetNodes, targetIDs []int64
	var weights []float32
	for t, tree := range f.trees {
		for n, node := range tree {
			treeIDs = append(treeIDs, int64(t))
			nodeIDs = append(nodeIDs, int64(n))
			if node.left < 0 {
				featureIDs, values = append(featureIDs, 0), append(values, 0)
				trueIDs, falseIDs = append(trueIDs, 0), append(falseIDs, 0)
				modes = append(modes, "LEAF")
				targetTrees, targetNodes = append(targetTrees, int64(t)), append(targetNodes, int64(n))
				targetIDs = append(targetIDs, 0)
				weights = append(weights, float32(node.pathLength/float64(len(f.trees))))
				continue
			}
			featureIDs, values = append(featureIDs, int64(node.feature)), append(values, node.threshold)
			trueIDs, falseIDs = append(trueIDs, int64(node.left)), append(falseIDs, int64(node.right))
			modes = append(modes, "BRANCH_LT")
		}
	}
	return nodeProto{
		opType: "TreeEnsembleRegressor", domain: "ai.onnx.ml", name: output,
		inputs: []string{input}, outputs: []string{output},
		attributes: []attribute{
			{name: "aggregate_function", kind: attrString, s: "SUM"},
			{name: "n_targets", i: 1},
			{name: "nodes_falsenodeids", kind: attrInts, ints: falseIDs},
			{name: "nodes_featureids", kind: attrInts, ints: featureIDs},
			{name: "nodes_modes", kind: attrStrings, strings: modes},
			{name: "nodes_nodeids", kind: attrInts, ints: nodeIDs},
			{name: "nodes_treeids", kind: attrInts, ints: treeIDs},
			{name: "nodes_truenodeids", kind: attrInts, ints: trueIDs},
			{name: "nodes_values", kind: attrFloats, floats: values},
			{name: "post_transform", kind: attrString, s: "NONE"},
			{name: "target_ids", kind: attrInts, ints: targetIDs},
			{name: "target_nodeids", kind: attrInts, ints: targetNodes},
			{name: "target_treeids", kind: attrInts, ints: targetTrees},
			{name: "target_weights", kind: attrFloats, floats: weights},
		},
	}
}
