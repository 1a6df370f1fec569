#include <glib.h>
#include <gst/gst.h>
