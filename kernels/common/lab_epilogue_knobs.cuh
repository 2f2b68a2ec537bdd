// The epilogue chain's knobs, defaulted to none, for kernels that run the chain alone (epilogue/apply.cu,
// epilogue/in_place.cu): EPI_OP1 .. EPI_OP4 are lab_epilogue.cuh's op codes (0 = none), BF16 the 16-bit type.
#pragma once

#ifndef BF16
#define BF16 0
#endif
#ifndef EPI_OP1
#define EPI_OP1 0
#endif
#ifndef EPI_OP2
#define EPI_OP2 0
#endif
#ifndef EPI_OP3
#define EPI_OP3 0
#endif
#ifndef EPI_OP4
#define EPI_OP4 0
#endif
