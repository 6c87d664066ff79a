#!/usr/bin/env python3
"""scripts/gpu/prologue.py's parsing and counting, on SASS text written here in cuobjdump's layout
(no cuobjdump, no GPU)."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "gpu",
                      "prologue.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import prologue  # noqa: E402

# k1: 8 instructions before its wait (two constant loads, a reciprocal, three copies, one of them
# predicated and one a bulk copy), then more after it; k2 has no wait.
LISTING = """
	code for sm_90a
		Function : _ZN8roofline4k1Ev
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* 0x00000a00ff017b82 */
        /*0010*/                   ULDC.64 UR4, c[0x0][0x210] ;                 /* 0x0000840000047ab9 */
        /*0020*/                   MUFU.RCP R6, R6 ;                            /* 0x0000000600067308 */
        /*0030*/                   LDGSTS.E.BYPASS.128 [R3], desc[UR4][R6.64] ; /* 0x0000000006037fae */
        /*0040*/               @P1 LDGSTS.E.BYPASS.128 [R3+0x10], desc[UR4][R6.64], P2 ; /* 0x0 */
        /*0050*/                   UBLKCP.S.G [UR8], [UR10], UR12 ;             /* 0x00000008080073ba */
        /*0060*/                   LDGDEPBAR ;                                  /* 0x00000000000079af */
        /*0070*/                   CS2R R4, SR_CLOCKLO ;                        /* 0x0000000000047805 */
        /*0080*/                   ACQBULK ;                                    /* 0x000000000000782e */
        /*0090*/                   LDC R2, c[0x0][0x218] ;                      /* 0x00008600ff027b82 */
        /*00a0*/                   LDGSTS.E.BYPASS.128 [R3], desc[UR4][R8.64] ; /* 0x0000000008037fae */
        /*00b0*/                   EXIT ;                                       /* 0x000000000000794d */
		Function : _ZN8roofline4k2Ev
        /*0000*/                   MOV R1, c[0x0][0x28] ;                       /* 0x00000a0000017a02 */
        /*0010*/                   EXIT ;                                       /* 0x000000000000794d */
"""


class PrologueTest(unittest.TestCase):
    def test_counts_only_the_code_before_the_first_wait(self):
        (n1, ops1), (n2, ops2) = prologue.kernels(LISTING)
        self.assertEqual((n1, n2), ("_ZN8roofline4k1Ev", "_ZN8roofline4k2Ev"))
        self.assertEqual(prologue.before_wait(ops1),
                         {"instructions": 8, "copies": 3, "constants": 2, "divisions": 1})
        self.assertIsNone(prologue.before_wait(ops2))

    def run_script(self, *args):
        with tempfile.NamedTemporaryFile("w", suffix=".sass", delete=False) as f:
            f.write(LISTING)
        try:
            return subprocess.run([sys.executable, SCRIPT, f.name, *args], capture_output=True,
                                  text=True)
        finally:
            os.unlink(f.name)

    def test_prints_each_kernel_or_says_it_has_no_wait(self):
        r = self.run_script()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("before the wait: 8 instructions, 3 async copies, 2 constant loads, "
                      "1 reciprocals", r.stdout)
        self.assertIn("_ZN8roofline4k2Ev\n  no PDL wait", r.stdout)

    def test_kernel_filter_and_its_error(self):
        r = self.run_script("--kernel", "k2E")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("k1Ev", r.stdout)
        r = self.run_script("--kernel", "nothing")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no kernel name contains 'nothing'", r.stderr)

    def test_a_file_without_functions_is_an_error(self):
        with tempfile.NamedTemporaryFile("w", suffix=".sass", delete=False) as f:
            f.write("not a listing\n")
        try:
            r = subprocess.run([sys.executable, SCRIPT, f.name], capture_output=True, text=True)
        finally:
            os.unlink(f.name)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no 'Function :' sections", r.stderr)


if __name__ == "__main__":
    unittest.main()
