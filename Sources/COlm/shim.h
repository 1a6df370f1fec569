#include <olm/olm.h>
#include <olm/pk.h>
#include <olm/sas.h>
