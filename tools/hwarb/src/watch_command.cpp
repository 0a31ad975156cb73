// placeholder, replaced by this work
