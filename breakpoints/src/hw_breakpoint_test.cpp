#include "hwarb/breakpoints/hw_breakpoint.h"

#include <gtest/gtest.h>
