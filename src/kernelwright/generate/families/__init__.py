"""Template families, one package each (pointwise, reduction, scan, gemm, attention, conv), with the same roles in
every one: ``matching`` (recognising the family's anchor in the captured graph), ``growing`` (the neighbours and
epilogues the group absorbs), ``writing`` (the kernels' and launcher's source) and ``family`` (the class that
implements :class:`~kernelwright.generate.families.base.Family`: claim, configuration space, render), plus a
``model`` (or ``mask``, ``body``) where a family's records or one of its parts need a module of their own. What they
share is in :mod:`.base`; the aten operator classes they read are in :mod:`kernelwright.generate.operators`.
"""
