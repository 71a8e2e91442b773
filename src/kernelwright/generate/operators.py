"""Classes of aten operators by what they do to a tensor: the one catalogue the capture, the planner, the pointwise
emitter and every template family read. Names are the overload packets' (``Node.op``: ``"view"``, ``"_to_copy"``).

A family that accepts only some members of a class says so where it uses it (``RESHAPES | UNIT_DIMS``), so that
what each one accepts stays visible there.
"""

from __future__ import annotations

# -- views: the same storage under another shape or order ----------------------------------------------------------
RESHAPES = frozenset({"view", "_unsafe_view", "reshape"})  # the same elements in the same order, another shape
UNIT_DIMS = frozenset({"unsqueeze", "squeeze"})  # add or drop dimensions of size 1
PERMUTES = frozenset({"permute", "transpose", "t"})  # the dimensions in another order
EXPANDS = frozenset({"expand"})  # size-1 dimensions broadcast (stride 0)
SELECTIONS = frozenset({"select", "slice", "getitem", "split", "split_with_sizes", "unbind"})  # parts of a tensor
STRIDED_VIEWS = frozenset({"as_strided", "_reshape_alias"})  # a view given by explicit sizes and strides

# -- copies: the same values ---------------------------------------------------------------------------------------
ALIASES = frozenset({"alias", "detach"})  # the very tensor (detach only leaves autograd)
COPIES = ALIASES | {"clone", "lift_fresh_copy"}  # the same values, perhaps in a new buffer
CASTS = frozenset({"_to_copy", "convert_element_type"})  # a copy that may change the dtype
# Copies that change at most the dtype: elementwise, though not tagged pointwise.
ELEMENTWISE_COPIES = CASTS | COPIES

# -- nodes that read no tensor -------------------------------------------------------------------------------------
# Need no data of their own: the pointwise emitter inlines them. `full_like` reads its argument's shape only (the
# argument is the group's anyway); `full` carries its shape in the graph.
CONSTANTS = frozenset({"scalar_tensor", "full", "full_like"})
NO_OPS = frozenset({"_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size"})  # dropped at capture

# -- what leaving a node to PyTorch costs ----------------------------------------------------------------------------
# Operators that only re-describe memory or do nothing: leaving them to PyTorch costs no kernel.
FREE = RESHAPES | UNIT_DIMS | PERMUTES | EXPANDS | SELECTIONS | STRIDED_VIEWS | ALIASES

# Random operators: a backward that draws again cannot reproduce the forward's mask.
RANDOM = frozenset({"rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "bernoulli",
                    "native_dropout", "normal", "uniform", "multinomial", "randperm", "exponential"})

# Operators whose result depends on the module's mode (`.train()` / `.eval()`) as export writes a module in training
# mode: batch norm with batch statistics and running statistics to update, dropout. A kernel written for training
# computes something else in eval mode. (An eval-mode batch norm is also what `F.batch_norm(training=False)` writes,
# and instance norm uses batch statistics in both modes: neither depends on the mode.)
MODE_DEPENDENT = frozenset({"_native_batch_norm_legit_functional", "native_dropout", "dropout", "feature_dropout",
                            "alpha_dropout", "feature_alpha_dropout"})
