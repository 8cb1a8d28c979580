"""Where the library meets TensorFlow's machinery: its private modules and
attributes, used only here (`compat`), and what a gradient function must
return to it (`contract`). Private to the package."""
