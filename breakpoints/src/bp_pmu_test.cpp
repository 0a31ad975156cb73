#include "hwarb/breakpoints/bp_pmu.h"

#include <gtest/gtest.h>
