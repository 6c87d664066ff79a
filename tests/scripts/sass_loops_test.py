#!/usr/bin/env python3
"""scripts/gpu/sass_loops.py's parsing, loop finding and comparison, on SASS text written here in
cuobjdump's layout (no cuobjdump, no GPU)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts", "gpu"))
import sass_loops  # noqa: E402

# Two kernels. k1 has an inner loop 0x0020-0x0060 (a copy, a shared load, the S2UR trap, a spill)
# inside an outer loop 0x0010-0x0080 that a second branch also closes; k2 has no loop.
LISTING = """
	code for sm_90a
		Function : _ZN8roofline49_GLOBAL__N__4f5ca673_16_sampling_cuda_cu_233b343c2k1Ev
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* 0x00000a00ff017b82 */
        /*0010*/                   LDG.E R2, desc[UR4][R4.64] ;                 /* 0x0000000404027981 */
        /*0020*/                   LDGSTS.E.BYPASS.128 [R3], desc[UR4][R6.64] ; /* 0x0000000006037fae */
        /*0030*/                   S2UR UR5, SR_CgaCtaId ;                      /* 0x00000000000579c3 */
        /*0040*/                   LDS.128 R8, [R3] ;                           /* 0x0000000003087984 */
        /*0050*/                   STL [R1], R8 ;                               /* 0x0000000801007387 */
        /*0060*/               @P0 BRA 0x20 ;                                   /* 0xfffffffc00000947 */
        /*0070*/               @P1 BRA `(.L_x_1) 0x10 ;                         /* 0xfffffffc00001947 */
        /*0080*/               @P2 BRA 0x10 ;                                   /* 0xfffffffc00002947 */
        /*0090*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;                /* 0x0000000000007b1d */
        /*00a0*/                   EXIT ;                                       /* 0x000000000000794d */
		Function : _ZN8roofline49_GLOBAL__N__4f5ca673_16_sampling_cuda_cu_233b343c2k2Ev
        /*0000*/                   MOV R1, c[0x0][0x28] ;                       /* 0x00000a0000017a02 */
        /*0010*/               @P0 BRA 0x30 ;                                   /* 0x0000000000000947 */
        /*0020*/                   EXIT ;                                       /* 0x000000000000794d */
        /*0030*/                   EXIT ;                                       /* 0x000000000000794d */
"""


class SassLoopsTest(unittest.TestCase):
    def test_parses_kernels_and_instructions(self):
        kernels = sass_loops.parse_sass(LISTING)
        self.assertEqual(len(kernels), 2)
        k1 = [k for k in kernels if k.endswith("2k1Ev")][0]
        self.assertEqual(len(kernels[k1]), 11)
        self.assertEqual(kernels[k1][1], (0x10, "LDG.E R2, desc[UR4][R4.64]"))

    def test_finds_loops_innermost_first_with_their_counts(self):
        kernels = sass_loops.parse_sass(LISTING)
        k1 = [k for k in kernels if k.endswith("2k1Ev")][0]
        found = sass_loops.loops(kernels[k1])
        # The inner loop, then the outer one (two branches back to 0x10: the shorter body kept).
        self.assertEqual([(l["start"], l["size"]) for l in found], [(0x20, 5), (0x10, 7)])
        inner, outer = found
        self.assertEqual((inner["LDG"], inner["LDGSTS"], inner["LDS"], inner["STL"],
                          inner["S2UR"], inner["BAR"]), (0, 1, 1, 1, 1, 0))
        self.assertEqual((outer["LDG"], outer["LDGSTS"]), (1, 1))
        k2 = [k for k in kernels if k.endswith("2k2Ev")][0]
        self.assertEqual(sass_loops.loops(kernels[k2]), [])  # a forward branch is no loop

    def test_report_shows_memory_loops_unless_all(self):
        kernels = sass_loops.parse_sass(LISTING)
        text = "\n".join(sass_loops.report(kernels, "2k1Ev"))
        self.assertIn("2 loops (2 shown)", text)
        self.assertIn("no kernel name contains 'nope'", sass_loops.report(kernels, "nope")[0])

    def test_same_ignores_addresses_and_the_file_hash_in_names(self):
        a = sass_loops.parse_sass(LISTING)
        moved = LISTING.replace("/*00", "/*10").replace(
            "49_GLOBAL__N__4f5ca673_16_sampling_cuda_cu_233b343c", "41_GLOBAL__N__652aeb79_9_v_head_cu_233b343c")
        self.assertEqual(sass_loops.compare(a, sass_loops.parse_sass(moved)), [])
        changed = sass_loops.parse_sass(LISTING.replace("LDS.128 R8", "LDS.64 R8"))
        diff = sass_loops.compare(a, changed)
        self.assertEqual(len(diff), 1)
        self.assertIn("differs", diff[0])
        self.assertIn("1 positions differ", diff[0])
        missing = sass_loops.parse_sass(LISTING.split("\t\tFunction : _ZN8roofline49_GLOBAL__N__4f5ca673_16_sampling_cuda_cu_233b343c2k2Ev")[0])
        self.assertTrue(any(line.startswith("only in A") for line in sass_loops.compare(a, missing)))


if __name__ == "__main__":
    unittest.main()
